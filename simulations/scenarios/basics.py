"""Back to basics: one tiny network trained by hand, forward, loss, backward and the SGD step.

Everything later in the talk splits or shares parts of this loop, so it is written out
in full here: a two-layer network  x -> Linear -> tanh -> Linear -> y_hat, a mean squared
error, the chain rule applied layer by layer from the loss back to the inputs
(Rumelhart, Hinton & Williams, "Learning representations by back-propagating errors",
Nature 1986), and plain stochastic gradient descent, w <- w - lr * g.

No autograd in the algorithm: the backward pass is the chain rule by hand, so each
gradient on screen is one line below. The checks then compare it with torch.autograd
and with finite differences, in float64 so they can be tight.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict, Field

from simulations import trace
from simulations.frames import Check, Summary
from simulations.models import max_abs_diff, regression_batch
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import tensor_view
from simulations.words import counted

OUT_FEATURES = 1
DTYPE = torch.float64  # a tiny net: float64 makes the gradient checks tight
FD_EPS = 1e-6  # central finite differences: error ~ eps^2 (truncation) + 1e-16/eps (rounding)
NAMES = ("W1", "b1", "W2", "b2")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    in_features: int = Field(2, ge=1, le=8, description="Inputs")
    hidden: int = Field(3, ge=2, le=8, description="Hidden neurons")
    batch: int = Field(4, ge=1, le=8, description="Samples per step")
    lr: float = Field(0.1, gt=0.0, le=2.0, description="Learning rate")
    steps: int = Field(3, ge=1, le=10, description="SGD steps")
    seed: int = Field(0, ge=0, le=2**31 - 1)


def init_weights(p: Params) -> dict[str, torch.Tensor]:
    """PyTorch's default Linear initialisation, from `seed`: the weights both the run and the reference start from."""
    g = torch.Generator().manual_seed(p.seed)
    weights = {}
    for name, fan_in, fan_out in (("1", p.in_features, p.hidden), ("2", p.hidden, OUT_FEATURES)):
        bound = 1 / fan_in ** 0.5  # nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        weights["W" + name] = (torch.rand(fan_out, fan_in, generator=g, dtype=DTYPE) * 2 - 1) * bound
        weights["b" + name] = (torch.rand(fan_out, generator=g, dtype=DTYPE) * 2 - 1) * bound
    return weights


def data(p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = regression_batch(p.batch, p.in_features, OUT_FEATURES, p.seed)
    return x.to(DTYPE), y.to(DTYPE)


# -- the training loop, by hand --------------------------------------------------------------------

def forward(w: dict[str, torch.Tensor], x: torch.Tensor) -> dict[str, torch.Tensor]:
    z1 = x @ w["W1"].T + w["b1"]  # hidden pre-activations, [batch, hidden]
    h = torch.tanh(z1)  # hidden activations
    y_hat = h @ w["W2"].T + w["b2"]  # the prediction, [batch, 1]
    return {"z1": z1, "h": h, "y_hat": y_hat}


def mse(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((y_hat - y) ** 2).mean()


def backward(w: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, acts: dict[str, torch.Tensor]) -> dict:
    """The chain rule, from the loss back to the first layer. Returns the weight gradients and the
    error signals dL/dz of each layer (a bias's gradient is its neuron's signal summed over the batch)."""
    d_y_hat = 2 * (acts["y_hat"] - y) / y.numel()  # dL/dy_hat of the mean squared error
    g = {"W2": d_y_hat.T @ acts["h"], "b2": d_y_hat.sum(0)}  # output layer: signal x its input
    d_h = d_y_hat @ w["W2"]  # back through the output layer's weights
    d_z1 = d_h * (1 - acts["h"] ** 2)  # back through tanh: tanh' = 1 - tanh^2
    g |= {"W1": d_z1.T @ x, "b1": d_z1.sum(0)}  # hidden layer: signal x its input
    return {"grads": {k: g[k] for k in NAMES}, "d_y_hat": d_y_hat, "d_z1": d_z1}


def sgd_step(w: dict[str, torch.Tensor], g: dict[str, torch.Tensor], lr: float) -> dict[str, torch.Tensor]:
    return {k: w[k] - lr * g[k] for k in NAMES}


def run(ctx: RankContext, p: Params) -> dict:
    x, y = data(p)
    w = init_weights(p)
    show = _Show(p, x, y)
    show.inputs(w)
    history = []
    for step in range(p.steps):
        with trace.span("forward", step=step):
            acts = forward(w, x)
            loss = mse(acts["y_hat"], y)
        show.forward(step, w, acts)
        show.loss(step, w, acts, loss)

        with trace.span("backward", step=step):
            back = backward(w, x, y, acts)
        show.backward(step, w, acts, back)

        with trace.span("sgd", step=step):
            new_w = sgd_step(w, back["grads"], p.lr)
        show.sgd(step, w, back["grads"], new_w)
        history.append({"weights": w, "grads": back["grads"], "new_weights": new_w, "loss": float(loss)})
        w = new_w

    final = forward(w, x)
    final_loss = float(mse(final["y_hat"], y))
    show.trained(w, final, final_loss)
    return {"history": history, "final_weights": w, "final_loss": final_loss}


# -- what the frames show (kept apart from the loop above) ------------------------------------------

def _r(t: torch.Tensor):
    return torch.round(t.detach(), decimals=6).tolist()


class _Show:
    """Frames of the story; `extra` carries the network's real numbers for the network view."""

    def __init__(self, p: Params, x: torch.Tensor, y: torch.Tensor) -> None:
        self.p, self.x, self.y = p, x, y
        self.losses: list[float] = []
        self.base = {"layers": [p.in_features, p.hidden, OUT_FEATURES], "activation": "tanh", "lr": p.lr,
                     "steps": p.steps, "batch": p.batch, "x": _r(x), "y": _r(y.flatten())}

    def _frame(self, phase, caption, step, w, *, tensors=(), acts=None, grads=None, signals=None, **more):
        extra = self.base | {"step": step, "weights": {k: _r(v) for k, v in w.items()},
                             "losses": list(self.losses)} | more
        if acts is not None:
            extra["activations"] = {k: _r(v.flatten() if k == "y_hat" else v) for k, v in acts.items()}
        if grads is not None:
            extra["grads"] = {k: _r(v) for k, v in grads.items()}
        if signals is not None:
            extra["signals"] = signals
        memory = {"parameters": list(w.values())}
        if grads is not None:
            memory["gradients"] = list(grads.values())
        if acts is not None:
            memory["activations"] = list(acts.values())
        trace.frame(phase, caption, tensors=list(tensors), memory=memory, extra=extra,
                    status=f"loss {self.losses[-1]:.4f}" if self.losses else None)

    def inputs(self, w):
        self._frame("inputs", f"A batch of {counted(self.p.batch, 'sample')} with {self.p.in_features} inputs each "
                    f"and one target; the weights start random (PyTorch's default initialisation)", None, w,
                    tensors=[tensor_view("x", "batch", self.x), tensor_view("y", "batch", self.y),
                             tensor_view("W1", "parameters", w["W1"]), tensor_view("W2", "parameters", w["W2"])])

    def forward(self, step, w, acts):
        self._frame("forward_hidden", f"Step {step + 1}, forward, layer 1: z = x·W1ᵀ + b1, then h = tanh(z), "
                    f"one value per hidden neuron and sample", step, w, acts={"z1": acts["z1"], "h": acts["h"]},
                    layer=1, tensors=[tensor_view("z1", "activations", acts["z1"]),
                                      tensor_view("h = tanh(z1)", "activations", acts["h"])])
        self._frame("forward_output", f"Step {step + 1}, forward, layer 2: ŷ = h·W2ᵀ + b2, the prediction",
                    step, w, acts=acts, layer=2, tensors=[tensor_view("h", "activations", acts["h"]),
                                                         tensor_view("ŷ", "activations", acts["y_hat"])])

    def loss(self, step, w, acts, loss):
        self.losses.append(round(float(loss), 8))
        self._frame("loss", f"Step {step + 1}, loss: mean of (ŷ − y)² over the batch = {float(loss):.5f}",
                    step, w, acts=acts, loss=float(loss),
                    tensors=[tensor_view("ŷ", "activations", acts["y_hat"]), tensor_view("y", "batch", self.y),
                             tensor_view("ŷ − y", "activations", acts["y_hat"] - self.y)])

    def backward(self, step, w, acts, back):
        g = back["grads"]
        signals = {"output": _r(back["d_y_hat"].sum(0)), "hidden": _r(back["d_z1"].sum(0))}
        self._frame("backward_output", f"Step {step + 1}, backward, layer 2: dL/dŷ = 2(ŷ − y)/B; "
                    f"dL/dW2 = (dL/dŷ)ᵀ·h, dL/db2 = Σ dL/dŷ", step, w, acts=acts, loss=self.losses[-1],
                    grads={"W2": g["W2"], "b2": g["b2"]}, signals={"output": signals["output"]}, layer=2,
                    tensors=[tensor_view("dL/dŷ", "gradients", back["d_y_hat"]),
                             tensor_view("dL/dW2", "gradients", g["W2"]), tensor_view("dL/db2", "gradients", g["b2"])])
        self._frame("backward_hidden", f"Step {step + 1}, backward, layer 1: back through W2 and tanh "
                    f"(tanh′ = 1 − h²), then dL/dW1 = (dL/dz1)ᵀ·x", step, w, acts=acts, loss=self.losses[-1],
                    grads=g, signals=signals, layer=1,
                    tensors=[tensor_view("dL/dz1", "gradients", back["d_z1"]),
                             tensor_view("dL/dW1", "gradients", g["W1"]), tensor_view("dL/db1", "gradients", g["b1"])])

    def sgd(self, step, w, grads, new_w):
        # The matrix weight that moves most, as a worked example of w ← w − lr·g with its real numbers.
        name, index = max(((k, i) for k in ("W1", "W2") for i in range(grads[k].numel())),
                          key=lambda ki: abs(float(grads[ki[0]].flatten()[ki[1]])))
        old, g, new = (float(t[name].flatten()[index]) for t in (w, grads, new_w))
        label = f"{name}[{index}]" if w[name].numel() > 1 else name
        self._frame("sgd", f"Step {step + 1}, SGD: every weight moves against its gradient, w ← w − η·dL/dw; "
                    f"e.g. {label}: {old:.4f} − {self.p.lr:g}·{g:.4f} = {new:.4f}", step, new_w, grads=grads,
                    loss=self.losses[-1], previous={k: _r(v) for k, v in w.items()},
                    example={"name": label, "w": old, "lr": self.p.lr, "g": g, "new": new},
                    tensors=[tensor_view("W1 (new)", "parameters", new_w["W1"]),
                             tensor_view("dL/dW1", "gradients", grads["W1"]),
                             tensor_view("W2 (new)", "parameters", new_w["W2"]),
                             tensor_view("dL/dW2", "gradients", grads["W2"])])

    def trained(self, w, acts, final_loss):
        self._frame("trained", f"After {counted(self.p.steps, 'step')} the loss went from {self.losses[0]:.5f} to "
                    f"{final_loss:.5f}. With N GPUs, each would compute these gradients on its own samples: "
                    f"they must be averaged before the SGD step", self.p.steps, w, acts=acts, final_loss=final_loss,
                    tensors=[tensor_view("W1", "parameters", w["W1"]), tensor_view("W2", "parameters", w["W2"])])


# -- the references and the checks ----------------------------------------------------------------

def _module(p: Params, w: dict[str, torch.Tensor]) -> torch.nn.Sequential:
    """A fresh nn.Module (Linear, Tanh, Linear) holding weights `w`."""
    model = torch.nn.Sequential(torch.nn.Linear(p.in_features, p.hidden, dtype=DTYPE), torch.nn.Tanh(),
                                torch.nn.Linear(p.hidden, OUT_FEATURES, dtype=DTYPE))
    with torch.no_grad():
        for (name, t), param in zip(((k, w[k]) for k in NAMES), model.parameters()):
            param.copy_(t)
    return model


def reference(p: Params, history: list[dict], final_weights: dict[str, torch.Tensor]) -> dict:
    """torch.autograd and torch.optim.SGD on a fresh nn.Module, one step at a time from the weights the run
    held at that step: the loss, the gradients and the step's new weights; and the loss at the trained
    weights. (Step by step, not a whole second trajectory: at a large lr training is chaotic, and two
    trajectories part from round-off alone.)"""
    x, y = data(p)
    losses, grads, steps = [], [], []
    for h in history:
        model = _module(p, h["weights"])
        optimizer = torch.optim.SGD(model.parameters(), lr=p.lr)
        loss = torch.nn.functional.mse_loss(model(x), y)
        grads.append(dict(zip(NAMES, torch.autograd.grad(loss, list(model.parameters())))))
        losses.append(float(loss.detach()))
        for param, g in zip(model.parameters(), grads[-1].values()):
            param.grad = g
        optimizer.step()
        steps.append(dict(zip(NAMES, (q.detach().clone() for q in model.parameters()))))
    with torch.no_grad():
        final_loss = float(torch.nn.functional.mse_loss(_module(p, final_weights)(x), y))
    return {"grads": grads, "losses": losses, "steps": steps, "final_loss": final_loss}


def finite_differences(p: Params, w: dict[str, torch.Tensor], picks: list[tuple[str, int]],
                       eps: float = FD_EPS) -> list[float]:
    """dL/dw for a few weights by central differences: (L(w + eps) − L(w − eps)) / 2eps."""
    x, y = data(p)
    out = []
    for name, index in picks:
        losses = []
        for sign in (1, -1):
            shifted = {k: v.clone() for k, v in w.items()}
            shifted[name].view(-1)[index] += sign * eps
            losses.append(float(mse(forward(shifted, x)["y_hat"], y)))
        out.append((losses[0] - losses[1]) / (2 * eps))
    return out


FP64_EPS = 2.0 ** -53  # unit round-off of float64


def roundings(p: Params) -> int:
    """The longest chain of float64 roundings behind a gradient element: the forward dot products (in_features,
    then hidden terms), the batch sum of the backward, and a few elementwise ops (residual, tanh, 1 − h²)."""
    return p.in_features + p.hidden + p.batch + 8


def magnitudes(p: Params, w: dict[str, torch.Tensor]) -> dict:
    """Σ|terms| behind every gradient element and the loss: the chain rule with every factor replaced by its
    absolute value, |ŷ| + |y| for the residual ŷ − y (which may cancel), and where a rounded value feeds a
    later factor, its own scale: h = tanh(z) is within k·ε·|z|_mag of tanh of the exact z (tanh' ≤ 1), so h
    carries 1 + |z|_mag, and 1 − h² twice that. A float64 result built from these terms lies within
    roundings·ε·Σ|terms| of the exact value (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1,
    to first order). Written out apart from the run's `backward`."""
    x, y = (t.abs() for t in data(p))
    a = {k: t.abs() for k, t in w.items()}
    z = x @ a["W1"].T + a["b1"]  # |x|·|W1| + |b1| ≥ |z1|, the scale of its round-off
    h = 1 + z  # |tanh| ≤ 1, plus the pre-activation's round-off carried through
    residual = h @ a["W2"].T + a["b2"] + y  # ≥ |ŷ − y|
    d_y = 2 * residual / y.numel()
    d_z = (d_y @ a["W2"]) * (1 + 2 * z)  # tanh' = 1 − h² ≤ 1, with h's round-off twice
    return {"grads": {"W2": d_y.T @ h, "b2": d_y.sum(0), "W1": d_z.T @ x, "b1": d_z.sum(0)},
            "loss": float((residual ** 2).mean())}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    r = results[0]
    history = r["history"]
    ref = reference(p, history, r["final_weights"])
    k = roundings(p)

    def excess(measured: dict, expected: dict, bound: dict) -> tuple[float, float, bool]:
        """(max |measured − expected|, the largest bound, every element within its own bound)."""
        gaps = {n: (measured[n] - expected[n]).abs() for n in NAMES}
        return (max(float(t.max()) for t in gaps.values()), max(float(b.max()) for b in bound.values()),
                all(bool((gaps[n] <= bound[n]).all()) for n in NAMES))

    # Hand-written backward vs autograd, each step from the same weights: two float64 computations of the
    # same sums, each within k·ε·Σ|terms| of the exact gradient, so 2k·ε·Σ|terms| apart at most, per element.
    autograd = [excess(h["grads"], ref["grads"][s], {n: 2 * k * FP64_EPS * m for n, m in
                                                      magnitudes(p, h["weights"])["grads"].items()})
                for s, h in enumerate(history)]
    autograd_diff, autograd_bound = max(a[0] for a in autograd), max(a[1] for a in autograd)
    # Losses: a mean of batch squared residuals, each from the forward's dot products; bound as above.
    loss_bounds = [2 * k * FP64_EPS * magnitudes(p, h["weights"])["loss"] for h in history]
    loss_gaps = [abs(h["loss"] - ref["losses"][s]) for s, h in enumerate(history)]
    final_bound = 2 * k * FP64_EPS * magnitudes(p, r["final_weights"])["loss"]
    final_loss_diff = abs(r["final_loss"] - ref["final_loss"])
    # The run starts from the initial weights and each step starts where the last one ended: the same values.
    chain = [init_weights(p)] + [h["new_weights"] for h in history]
    continuity = max(max_abs_diff(w[n], chain[s][n]) for s, w in enumerate([h["weights"] for h in history]
                                                                          + [r["final_weights"]]) for n in NAMES)
    # SGD's w − lr·g: the gradients may differ as bounded above, then one multiply and one subtraction each
    # rounded: |Δ| ≤ lr·(gradient bound) + 2·2ε·(|w| + lr·|g|).
    sgd = [excess(h["new_weights"], ref["steps"][s],
                  {n: p.lr * 2 * k * FP64_EPS * magnitudes(p, h["weights"])["grads"][n]
                   + 4 * FP64_EPS * (h["weights"][n].abs() + p.lr * h["grads"][n].abs()) for n in NAMES})
           for s, h in enumerate(history)]
    sgd_diff, sgd_bound = max(a[0] for a in sgd), max(a[1] for a in sgd)
    # Finite differences at the first step, on the first and the last entry of every tensor. Their error:
    # truncation C·eps², estimated by Richardson from the quotient at 2·eps (D(2e) − D(e) ≈ 3C·e²), plus the
    # rounding of two losses, each within k·ε·L_mag, divided by 2·eps; plus the analytic gradient's own
    # round-off; ×2 for the first-order estimates.
    picks = sorted({(n, i) for n in NAMES for i in (0, history[0]["weights"][n].numel() - 1)})
    numeric = finite_differences(p, history[0]["weights"], picks)
    numeric_2e = finite_differences(p, history[0]["weights"], picks, eps=2 * FD_EPS)
    analytic = [float(history[0]["grads"][n].flatten()[i]) for n, i in picks]
    first = magnitudes(p, history[0]["weights"])
    fd_gaps = [abs(a - b) for a, b in zip(numeric, analytic)]
    fd_bounds = [2 * (abs(d2 - d1) / 3 + k * FP64_EPS * first["loss"] / FD_EPS
                      + k * FP64_EPS * float(first["grads"][n].flatten()[i]))
                 for (n, i), d1, d2 in zip(picks, numeric, numeric_2e)]
    fd_diff = max(fd_gaps)
    losses = [h["loss"] for h in history] + [r["final_loss"]]
    n_params = sum(t.numel() for t in history[0]["weights"].values())
    bound_text = (f"float64, per element: 2·{k}·ε·Σ|terms| (ε = 2⁻⁵³; {k} roundings: in_features + hidden + batch "
                  f"+ 8; Σ|terms| the chain rule in absolute values, Higham §3.1)")

    checks = [
        Check(name="hand-written backward equals torch.autograd.grad", passed=all(a[2] for a in autograd),
              measured=autograd_diff, expected=f"≤ {autograd_bound:.1e}",
              detail=f"max |grad − autograd grad| over every weight and step, a fresh nn.Module holding the run's "
                     f"weights of that step, {p.steps} step(s); {bound_text}, the largest bound shown; a wrong "
                     f"derivative errs by > 1e-3"),
        Check(name="gradients equal finite differences", passed=all(g <= b for g, b in zip(fd_gaps, fd_bounds)),
              measured=fd_diff, expected=f"≤ {max(fd_bounds):.1e}",
              detail=f"central differences, eps = {FD_EPS:g}, float64, weights " + ", ".join(f"{n}[{i}]" for n, i in picks)
                     + "; bound per weight: 2 × (truncation, estimated from the quotient at 2·eps, + the losses' "
                     "rounding k·ε·L/eps + the gradient's)"),
        Check(name="every SGD step equals torch.optim.SGD's", passed=all(a[2] for a in sgd),
              measured=sgd_diff, expected=f"≤ {sgd_bound:.1e}",
              detail="each step's new weights vs torch.optim.SGD(lr) stepping a fresh nn.Module from the same "
                     "weights; float64, per element: lr × the gradients' bound + 4ε·(|w| + lr·|g|)"),
        Check(name="each step starts where the last one ended", passed=continuity == 0.0, measured=continuity,
              expected=0.0, detail="the first from the initial weights, every other from the previous step's new "
                                   "weights, the trained weights from the last: the same values, bit for bit"),
        Check(name="losses equal the reference model's", passed=all(g <= b for g, b in zip(loss_gaps, loss_bounds)),
              measured=max(loss_gaps), expected=f"≤ {max(loss_bounds):.1e}",
              detail=f"the loss of every step; {bound_text}"),
        Check(name="trained loss equals the reference model's", passed=final_loss_diff <= final_bound,
              measured=final_loss_diff, expected=f"≤ {final_bound:.1e}",
              detail=f"the loss shown after {p.steps} step(s) vs the nn.Module's loss at the trained weights; bound "
                     f"as for the losses"),
    ]
    return Summary(checks=checks, figures={
        "losses": losses, "loss_first": losses[0], "loss_last": losses[-1],
        "parameters": n_params, "gradient_bytes": n_params * 8,
        "finite_differences": {f"{n}[{i}]": {"analytic": a, "numeric": b}
                               for (n, i), a, b in zip(picks, analytic, numeric)},
        "frames": len(frames),
    })


SCENARIO = Scenario(
    name="basics",
    title="Back to basics: one tiny network, trained by hand",
    description="Forward, loss, backward by the chain rule and the SGD step of a two-layer network, with real values.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["network", "ranks", "timeline"],
    world_size=lambda p: 1,
    controls=["hidden", "lr", "steps"],
)
