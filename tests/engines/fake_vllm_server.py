"""A stand-in for the run's vLLM server (tests/engines/test_vllm_server_launcher.py), keeping the contract the launcher
relies on: it listens on 127.0.0.1 at ``--port`` and answers ``GET /health`` with 200 once up, as vLLM's server does
(trl 1.16 generation/vllm_client.py:278). ``FAKE_VLLM`` picks how it behaves:

- ``ready``: answers at once; ``die``: answers, then exits with code 3 after 2 s;
- ``hang``: listens but answers 503 for ever (an engine that never finishes starting);
- ``crash``: exits with code 1 at once, saying why; ``taken``: the first start fails as a port taken at bind time
  does (the marker file ``FAKE_VLLM_MARKER`` remembers it), the next one answers.
"""

import http.server
import os
import sys
import threading
import time

port = int(sys.argv[sys.argv.index("--port") + 1])
mode = os.environ.get("FAKE_VLLM", "ready")
if mode == "crash":
    print("RuntimeError: Unsupported CPU attention configuration: head_dim=24", flush=True)
    sys.exit(1)
if mode == "taken" and not os.path.exists(os.environ["FAKE_VLLM_MARKER"]):
    open(os.environ["FAKE_VLLM_MARKER"], "w").close()
    print(
        f"OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address already in use"
    )
    sys.exit(1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503 if mode == "hang" else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", port), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"serving on 127.0.0.1:{port}", flush=True)
time.sleep(2 if mode == "die" else 3600)
sys.exit(3)
