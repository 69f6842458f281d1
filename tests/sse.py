"""A small Server-Sent Events reader for tests: (event, id, data) tuples from a streamed response."""

from __future__ import annotations

import json
from collections.abc import Iterator


def read_events(lines: Iterator[str]) -> Iterator[tuple[str, str | None, dict]]:
    event, event_id, data = "message", None, []
    for line in lines:
        if line == "":
            if data:
                yield event, event_id, json.loads("\n".join(data))
            event, event_id, data = "message", None, []
        elif line.startswith(":"):
            continue  # a comment (ping)
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "id":
                event_id = value
            elif field == "data":
                data.append(value)
