"""A stand-in for the Hugging Face Hub's HTTP API on loopback, for `nmt publish --push`'s
test: it makes repositories, says every file uploads inline ("regular"), and keeps each
commit's files (and the requests it saw), so nothing is sent anywhere."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Hub:
    def __init__(self, root: Path):
        self.root, self.requests, self.repos = root, [], {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hub.requests.append(("POST", self.path, self.headers.get("authorization")))
                self._answer(*hub.post(self.path, body))

            def do_GET(self):
                hub.requests.append(("GET", self.path, self.headers.get("authorization")))
                self._answer(404, {"error": "not in the stand-in"})

            def _answer(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def post(self, path: str, body: bytes) -> tuple[int, dict]:
        if path == "/api/repos/create":
            spec = json.loads(body)
            repo = f"{spec.get('organization') or 'user'}/{spec['name']}"
            self.repos.setdefault(repo, {"private": spec.get("private", spec.get("visibility") == "private")})
            return 200, {"url": f"{self.url}/{repo}", "name": repo, "id": repo}
        if path == "/api/validate-yaml":  # the card's metadata, checked before a commit
            return 200, {"errors": [], "warnings": []}
        parts = path.split("/")  # /api/models/ORG/NAME/(preupload|commit)/REV
        if len(parts) < 7 or parts[2] != "models":
            return 404, {"error": f"{path} is not in the stand-in"}
        repo, action = "/".join(parts[3:5]), parts[5]
        if action == "preupload":
            files = json.loads(body)["files"]
            return 200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                    "shouldIgnore": False} for f in files]}
        if action == "commit":
            out = self.root / repo
            for line in body.decode().splitlines():
                op = json.loads(line)
                if op["key"] == "file":
                    target = out / op["value"]["path"]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(base64.b64decode(op["value"]["content"]))
            oid = hashlib.sha1(body).hexdigest()
            return 200, {"commitUrl": f"{self.url}/{repo}/commit/{oid}", "commitOid": oid,
                         "pullRequestUrl": None}
        return 404, {"error": path}

    def close(self) -> None:
        self.server.shutdown()
