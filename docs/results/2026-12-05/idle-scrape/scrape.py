#!/usr/bin/env python3
"""Scrapes a moirai engine's /metrics every PERIOD seconds over one kept-alive connection, asking
for the families moirai's middleware asks for, until killed: the middleware's scrape without the
middleware. usage: scrape.py HOST:PORT [PERIOD]"""
import http.client
import sys
import time

FAMILIES = ["moirai_operator_tuples_in_total", "moirai_operator_tuples_out_total", "moirai_operator_queue_len",
            "moirai_operator_head_wait_seconds", "moirai_operator_cpu_seconds_total", "moirai_operator_backlog"]

host, port = sys.argv[1].rsplit(":", 1)
period = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
path = "/metrics?" + "&".join(f"name[]={f}" for f in FAMILIES)
conn = None
scrapes = 0
next_at = time.monotonic()
while True:
    try:
        if conn is None:
            conn = http.client.HTTPConnection(host, int(port), timeout=2)
        conn.request("GET", path)
        body = conn.getresponse().read()
        scrapes += 1
    except (OSError, http.client.HTTPException):
        conn = None  # the engine is not up yet, or has ended
    next_at += period
    time.sleep(max(0.0, next_at - time.monotonic()))
