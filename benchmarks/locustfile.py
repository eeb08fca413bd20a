"""Locust users for `nmt serve` (benchmarks/serve_load.py starts the server and runs this
headless, bounded, on loopback): each user sends the page's five kinds of request in
turn over the sentence pairs in $NMT_LOAD_PAIRS (a JSON list of [source, target]), or
only its two kinds of translation when $NMT_LOAD_KINDS is "translate".

A 503 that carries Retry-After is the server's documented answer when every decode slot
is taken: it is counted apart ("busy" in the failures table), not as an error."""

from __future__ import annotations

import itertools
import json
import os

from locust import HttpUser, between, task

PAIRS = json.loads(open(os.environ["NMT_LOAD_PAIRS"], encoding="utf-8").read())
KINDS = [  # (name, path, body builder)
    ("translate greedy", "/api/translate", lambda s, t: {"source": s, "beam": 1}),
    ("translate beam4 2-best", "/api/translate",
     lambda s, t: {"source": s, "beam": 4, "n_best": 2}),
    ("align free views", "/api/align", lambda s, t: {"source": s, "views": True}),
    ("align forced", "/api/align", lambda s, t: {"source": s, "target": t}),
    ("align forced saliency", "/api/align",
     lambda s, t: {"source": s, "target": t, "method": "saliency"}),
]
if os.environ.get("NMT_LOAD_KINDS") == "translate":  # serve_load.py --kinds translate
    KINDS = [kind for kind in KINDS if kind[1] == "/api/translate"]
_next = itertools.count()


class PageUser(HttpUser):
    wait_time = between(0.0, 0.1)

    @task
    def ask(self) -> None:
        k = next(_next)
        name, path, body = KINDS[k % len(KINDS)]
        source, target = PAIRS[k % len(PAIRS)]
        with self.client.post(path, json=body(source, target), name=name, timeout=60,
                              catch_response=True) as response:
            if response.status_code == 503 and response.headers.get("Retry-After"):
                response.failure("busy: 503 with Retry-After")
            elif response.status_code != 200:
                response.failure(f"error {response.status_code}")
