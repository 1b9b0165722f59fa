"""Check turns.jsonl: every line parses, ids unique, fields and kinds valid, every relevant id is a skill folder
with a SKILL.md under ../../../shared/corpora (or $CORPORA), relevant empty exactly on the no-skill kinds."""
import json, os, sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CORPORA = os.environ.get("CORPORA", "/work/shared/corpora")
MIXED = {"hermes-agent", "anthropics-skills", "obra-superpowers", "openai-skills", "k-dense-scientific-skills",
         "wshobson-agents", "alirezarezvani-claude-skills", "trailofbits-skills", "orchestra-ai-research-skills",
         "moonlight-lupin-agent-skills", "dtsong-data-engineering-skills", "dotnet-artisan-130"}
KINDS = {"task", "followup", "small-edit", "ack", "near-miss", "general", "smalltalk"}

def main(path=os.path.join(HERE, "turns.jsonl")):
    errs, ids, kinds, langs = [], set(), Counter(), Counter()
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        try:
            r = json.loads(line)
        except ValueError as e:
            errs.append(f"line {n}: {e}"); continue
        if set(r) != {"id", "query", "relevant", "kind", "lang"}:
            errs.append(f"line {n}: fields {sorted(r)}")
        if r.get("id") in ids:
            errs.append(f"line {n}: duplicate id {r.get('id')}")
        ids.add(r.get("id"))
        if r.get("kind") not in KINDS:
            errs.append(f"line {n}: kind {r.get('kind')}")
        if not isinstance(r.get("query"), str) or not r["query"].strip():
            errs.append(f"line {n}: empty query")
        rel = r.get("relevant")
        if not isinstance(rel, list) or len(set(rel)) != len(rel):
            errs.append(f"line {n}: relevant not a list of distinct ids")
            rel = []
        if (r.get("kind") == "task") != bool(rel):
            errs.append(f"line {n}: relevant must be non-empty exactly for kind task")
        for s in rel:
            if s.split("/")[0] not in MIXED:
                errs.append(f"line {n}: {s} not in the mixed corpus")
            if not os.path.isfile(os.path.join(CORPORA, s, "SKILL.md")):
                errs.append(f"line {n}: no SKILL.md for {s}")
        kinds[r.get("kind")] += 1
        langs[r.get("lang")] += 1
    for e in errs:
        print(e)
    print(f"{sum(kinds.values())} rows; kinds {dict(kinds.most_common())}; langs {dict(langs.most_common())}")
    return 1 if errs else 0

if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
