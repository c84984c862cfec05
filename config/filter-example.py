#!/usr/bin/env python3
"""An mcp-chain filter: refuse shell-like tools, strip a field, pass the rest."""
import json
import sys

for line in sys.stdin:
    m = json.loads(line)
    msg = m["message"]
    answer = {"id": m["id"], "action": "pass"}
    name = m["context"].get("name", "")
    if m["kind"] == "request" and name.startswith("run_"):
        answer = {"id": m["id"], "action": "drop", "reason": f"{name} is not allowed"}
    elif m["kind"] == "request" and "debug" in msg.get("params", {}).get("arguments", {}):
        del msg["params"]["arguments"]["debug"]
        answer["message"] = msg
    print(json.dumps(answer), flush=True)
