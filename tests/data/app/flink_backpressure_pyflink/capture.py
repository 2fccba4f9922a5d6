import json, sys, time, urllib.request, os
B = "http://127.0.0.1:18081"
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def get(p):
    with urllib.request.urlopen(B + p, timeout=10) as r:
        return json.loads(r.read())
def save(name, p):
    d = get(p)
    with open(os.path.join(out, name), "w") as f:
        json.dump(d, f, indent=2)
    return d
for _ in range(120):
    try:
        jobs = get("/jobs")["jobs"]
        if jobs and jobs[0]["status"] == "RUNNING":
            break
    except Exception as e:
        pass
    time.sleep(2)
jid = jobs[0]["id"]
deadline = time.time() + (float(sys.argv[2]) if len(sys.argv) > 2 else 240)
while time.time() < deadline:
    try:
        c = get(f"/jobs/{jid}/checkpoints")["counts"]
        if c.get("completed", 0) >= 4:
            break
    except Exception:
        pass
    time.sleep(3)
job = save("job.json", f"/jobs/{jid}")
cps = save("checkpoints.json", f"/jobs/{jid}/checkpoints")
save("checkpoints-config.json", f"/jobs/{jid}/checkpoints/config")
save("job-metrics.json", f"/jobs/{jid}/metrics?get=lastCheckpointDuration,numberOfFailedCheckpoints,totalNumberOfCheckpoints,numberOfCompletedCheckpoints,lastCheckpointSize")
cid = cps["latest"]["completed"]["id"] if cps.get("latest", {}).get("completed") else None
for i, v in enumerate(job["vertices"]):
    vid = v["id"]
    save(f"vertex{i}-subtask-metrics.json", f"/jobs/{jid}/vertices/{vid}/subtasks/metrics?get=checkpointAlignmentTime,checkpointStartDelayNanos,backPressuredTimeMsPerSecond,isBackPressured")
    if cid is not None:
        try:
            save(f"vertex{i}-checkpoint-{cid}-details.json", f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}")
        except Exception as e:
            print("details", i, e)
print("captured", jid, cid, [v["name"] for v in job["vertices"]])
