"""How a rank sends its frame fragments: the first at once, then batched, nothing lost at the end."""

from simulations.runtime.worker import FragmentBatcher


def test_first_fragment_goes_at_once_then_batches_then_flush_sends_the_rest(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("simulations.runtime.worker.time.monotonic", lambda: clock[0])
    sent: list[list[dict]] = []
    batcher = FragmentBatcher(sent.append, interval_s=0.025)

    batcher({"index": 0})
    assert sent == [[{"index": 0}]]  # the first frame is not held back
    clock[0] += 0.010
    batcher({"index": 1})
    batcher({"index": 2})
    assert len(sent) == 1  # within the interval: held
    clock[0] += 0.020
    batcher({"index": 3})
    assert sent[-1] == [{"index": 1}, {"index": 2}, {"index": 3}]
    batcher({"index": 4})
    batcher.flush()
    assert sent[-1] == [{"index": 4}]
    batcher.flush()
    assert len(sent) == 3  # an empty flush sends nothing
