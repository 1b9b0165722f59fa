"""What the eval scripts share: the test data's place, the mixed library,
cached index builds, JSON-lines sets and the in-process semantic tier.

``run_eval`` and the scripts it reports for (``sessions``, ``learning``)
all read these from here, so none of them imports another's entry point.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from retriever import build, store  # noqa: E402

SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
MIXED = ["hermes-agent", "anthropics-skills", "obra-superpowers", "openai-skills",
         "k-dense-scientific-skills", "wshobson-agents", "alirezarezvani-claude-skills",
         "trailofbits-skills", "orchestra-ai-research-skills", "moonlight-lupin-agent-skills",
         "dtsong-data-engineering-skills", "dotnet-artisan-130"]

def build_index(roots, profile, folder):
    """Build an index of ``roots`` under ``profile``; returns the loaded index.
    A cached index is reused only while the library's code is unchanged:
    the key hashes every retriever/*.py, so an index built by older code
    (another format, other features) is never scored as this code's."""
    import hashlib
    h = hashlib.blake2b("\0".join(roots).encode("utf-8"), digest_size=8)
    code = os.path.join(REPO, "retriever")
    for name in sorted(os.listdir(code)):
        if name.endswith(".py"):
            with open(os.path.join(code, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    key = h.hexdigest()
    path = os.path.join(folder, "%s-%s.skr" % (profile, key))
    if not os.path.exists(path):
        scope = build.resolve(roots)
        scope["disabled"] = set()
        build.build(scope, path, profile)
    idx = store.load(path)
    idx["_path"] = path  # the semantic rows find the vectors beside it
    return idx


def load_jsonl(path):
    """The rows of a JSON-lines query file ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def semantic_provider(args):
    """The in-process semantic provider when the tier is installed and
    not turned off (``--no-semantic`` or SKILL_RETRIEVAL_SEMANTIC=off)."""
    from retriever import semantic
    if args.no_semantic or not semantic.enabled():
        return None
    from retriever.semantic import inproc
    return inproc.Provider(max_indexes=64)  # every own collection stays loaded


def with_vectors(provider, idx):
    """``idx`` once the provider has its vectors (embedding them if needed)."""
    if not provider.wait(idx["_path"], idx, timeout=1800):
        raise SystemExit("semantic tier: the model or vectors did not load (%s)" % provider.status)
    return idx


def skill_id(path):
    """A result's id as ../shared/eval spells it: its folder under corpora/."""
    return path.rsplit("/SKILL.md", 1)[0].split("/corpora/", 1)[-1]
