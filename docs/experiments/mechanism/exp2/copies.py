# Descriptive count behind copies.txt (Exp 2): per member and epoch, tasks, valid, distinct share of valid
# expressions, and the share repeating a valid task of an earlier epoch. Run from the repo root after
# gunzip -k docs/experiments/mechanism/exp2/genenv.db.gz and pointing the path below at it.
import sqlite3, json, collections
db = sqlite3.connect("runs/mech/exp2/genenv.db")
runs = {r: m for r, m in db.execute("select id, json_extract(config,'$.mode') from run")}
rep = {}
for r, in db.execute("select id from run"): pass
out = {}
for run, mode in runs.items():
    rows = db.execute("select epoch, status, payload, seed_id from task where run_id=? order by epoch", (run,)).fetchall()
    seen = set(); by = collections.defaultdict(lambda: [0,0,0,0])
    seeds = {}
    for ep, st, pl, sid in rows:
        e = by[ep]; e[0] += 1
        if st != "valid": continue
        expr = json.loads(pl).get("expression","").replace(" ","")
        e[1] += 1
        if ep >= 1 and expr in seen: e[2] += 1
        e[3] += 0
    # second pass: distinct within epoch and copies of earlier epochs
    seen = set(); res = {}
    for ep in sorted(by):
        exprs = [json.loads(pl).get("expression","").replace(" ","") for e2, st, pl, sid in rows if e2 == ep and st == "valid"]
        copies = sum(1 for x in exprs if x in seen)
        res[ep] = (len([1 for e2, *_ in rows if e2 == ep]), len(exprs), round(len(set(exprs))/max(1,len(exprs)),3), round(copies/max(1,len(exprs)),3))
        seen |= set(exprs)
    out[run] = (mode, res)
for run, (mode, res) in out.items():
    print(mode, run[:8], "epoch: (tasks, valid, distinct share, share copying an earlier epoch's valid task)")
    for ep, v in res.items(): print("  ", ep, v)
