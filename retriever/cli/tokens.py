"""``skill-retrieve tokens``: what retrieval saves per turn, on your skills.

Three numbers, each measured on the user's own library:

1. the stock listing every turn carries today: Hermes' ``<available_skills>``
   block (categories, 4-space skill lines, descriptions cut to 60
   characters) and Claude Code's name + description listing;
2. the names-only block the Hermes plugin leaves in its place
   (``retriever.compact``);
3. the block injected per user message by the real retriever at
   TOP_K/INJECT_K over a set of queries: mean, p95, how often empty.

Tokens are estimated as characters / 4 and labelled so.  Cold path.
"""

import json
import os
import sys

from retriever import build, compact, locate, query, render, service, settings, skills
from retriever.cli.stats import percentile

EST = "≈ tokens (chars/4)"
HERMES_DESC_MAX = compact.DESC_MAX  # agent.skill_utils.extract_skill_description
CLAUDE_DESC_MAX = 1536     # Claude Code's skillListingMaxDescChars
CLAUDE_BUDGET = 8000       # Claude Code's fallback listing budget (chars)

# Generic developer prompts, used when --queries is not given.
DEFAULT_QUERIES = (
    "fix the failing unit test in the payment module",
    "write a commit message for these changes",
    "review this pull request for security issues",
    "set up a github actions workflow to run tests on every push",
    "why is this docker container exiting immediately",
    "refactor this function to be more readable",
    "add type hints to this python module",
    "deploy the app to kubernetes",
    "write a README for this project",
    "debug a memory leak in the node server",
    "create a postgres migration that adds an index",
    "explain what this regex does",
    "convert this csv file to json",
    "speed up this slow sql query",
    "add logging to the api handlers",
    "write end to end tests for the login page",
    "bump the dependencies and fix what breaks",
    "summarise the changes since the last release",
    "make a pdf report from this spreadsheet",
    "thanks, that looks good",
)

def estimate(chars):
    """Tokens for ``chars`` characters: characters / 4, rounded."""
    return int(round(chars / 4.0))


# ------------------------------------------------------------ stock lists


def hermes_description(desc):
    """A description as Hermes lists it: quotes stripped, cut to 60
    characters (57 plus ``...``)."""
    desc = str(desc or "").strip().strip("'\"")
    return desc[:HERMES_DESC_MAX - 3] + "..." if len(desc) > HERMES_DESC_MAX else desc


def hermes_category(rec):
    """Hermes' category for a skill: its folder path minus the skill's own
    folder; a skill directly under the root is its own category."""
    rel = rec["id"].split(":", 1)[-1]
    parts = rel.split("/")
    return "/".join(parts[:-1]) if len(parts) > 1 else parts[0]


_OS = {"macos": "darwin", "linux": "linux", "windows": "win32"}


def os_visible(rec):
    """Hermes' OS gate (frontmatter ``platforms``): hidden from the index
    on other operating systems."""
    plats = (rec.get("vis") or {}).get("platforms")
    return not plats or any(sys.platform.startswith(_OS.get(p, p)) for p in plats)


def _category_descriptions(roots):
    """``{category: description}`` from each root's DESCRIPTION.md files
    (the first root wins, as in Hermes)."""
    from retriever import discover, frontmatter
    out = {}
    for root in roots:
        base = root["path"]
        if discover.outside_project(root):
            continue  # a clone's link to / is not walked here either (the build reports it)
        for d, _, files in os.walk(base, followlinks=True):
            if "DESCRIPTION.md" not in files or d == base:
                continue
            try:
                with open(os.path.join(d, "DESCRIPTION.md"), encoding="utf-8") as f:
                    fm, _, _ = frontmatter.split_frontmatter(f.read())
                data = frontmatter.load_yaml(fm or "") or {}
            except Exception:
                continue
            desc = data.get("description") if isinstance(data, dict) else None
            if desc:
                cat = os.path.relpath(d, base).replace(os.sep, "/")
                out.setdefault(cat, str(desc).strip().strip("'\""))
    return out


def hermes_block(recs, cat_desc=None):
    """The ``<available_skills>`` block Hermes' build_skills_system_prompt
    writes for ``recs`` (dicts with id, name, description): categories
    sorted, 2-space category lines, 4-space skill lines sorted by name."""
    cat_desc = cat_desc or {}
    by_cat = {}
    for r in recs:
        by_cat.setdefault(hermes_category(r), []).append((r["name"], hermes_description(r["description"])))
    lines = []
    for cat in sorted(by_cat):
        lines.append("  %s: %s" % (cat, cat_desc[cat]) if cat_desc.get(cat) else "  %s:" % cat)
        seen = set()
        for name, desc in sorted(by_cat[cat], key=lambda x: x[0]):
            if name in seen:
                continue
            seen.add(name)
            lines.append("    - %s: %s" % (name, desc) if desc else "    - %s" % name)
    return "<available_skills>\n" + "\n".join(lines) + "\n</available_skills>"


def names_only_block(block):
    """What the Hermes plugin's middleware leaves of ``block``: one names
    line per top-level category, its marker and its note (retriever.compact)."""
    return compact.compact_text(block) or block


def claude_listing(recs):
    """Claude Code's skill listing: one ``- name: description`` line per
    skill, each description capped at 1,536 characters."""
    return "".join("- %s: %s\n" % (r["name"], r["description"][:CLAUDE_DESC_MAX]) for r in recs)


# ------------------------------------------------------------- injection


def load_queries(path):
    """Queries from a file: JSONL with a ``query`` field, or one per line."""
    out = []
    # Undecodable bytes are replaced, as in a query's stdin.
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    q = obj.get("query")
                    if isinstance(q, str) and q.strip():
                        out.append(q)
                    continue
            out.append(line)
    return out


def injections(idx, queries, top_k, inject_k, load=None):
    """Characters injected per query: the retrieved block, as the hooks
    and the Hermes plugin render it ("" when nothing is relevant);
    ``load``: the runner's way to load a skill (its guidance line)."""
    return [len(render.text_block(query.search(idx, q, top_k)[:inject_k], load)) for q in queries]


def injection_summary(req, queries, load=None):
    """``({"mean", "p95", "max", "empty"}, index path)``: the characters
    injected per query over the index of ``req`` (``service.open_index``),
    the one measurement behind every net saving."""
    top_k, inject_k = settings.limits()
    idx, path = service.open_index(dict(req, quiet=True))
    inj = injections(idx, queries, top_k, inject_k, load)
    mean = sum(inj) / len(inj) if inj else 0.0
    return {"mean": round(mean, 1), "p95": percentile(inj, 95) or 0, "max": max(inj) if inj else 0,
            "empty": sum(1 for n in inj if n == 0)}, path


def net_saving(stock, names_only, injection_mean):
    """What a turn saves, in characters: the stock listing, less the
    names-only listing that replaces it and the mean injection that comes
    with it.  Every table (Hermes' and each runner's) uses this one."""
    return round(stock - names_only - injection_mean, 1)


# The user's own prompts from the usage record: the most recent this many,
# when it holds at least MIN_RECENT (fewer would say little).
RECENT = 50
MIN_RECENT = 5


def recent_prompts(runner=None, n=RECENT):
    """The user's own recent prompts, from the usage record (kept while
    learning is on; ``runner``: that runner's only): the last ``n``
    distinct ones, oldest first."""
    from retriever import usage
    try:
        entries = usage.read(runner=runner)[0]
    except OSError:
        return []
    seen = {}
    for e in reversed(entries):
        if e["prompt"] and e["prompt"] not in seen:
            seen[e["prompt"]] = None
            if len(seen) >= n:
                break
    return list(reversed(list(seen)))


def sample_note(source, inj, n):
    """A line saying what the injection figures rest on, or None for the
    user's --queries: ``source`` is "given", "recent" (their prompts from
    the usage record) or anything else for the generic built-in prompts;
    when nothing fits most of those, the mean says little about the
    user's library."""
    if source == "given":
        return None
    if source == "recent":
        return ("queries: your %d most recent prompts, from the usage record (skill-retrieve last)" % n)
    if n and inj["empty"] * 2 > n:
        return ("the %d built-in prompts do not fit these skills (nothing injected for %d of them), so the "
                "injection figures say little; measure with your own prompts: --queries FILE"
                % (n, inj["empty"]))
    return ("the sample is generic: %d developer prompts, as the usage record holds fewer than %d of yours; "
            "--queries FILE measures with your own" % (n, MIN_RECENT))


def pick_queries(queries, runner=None):
    """``(queries, source)``: the user's --queries ("given"), else their
    recent prompts ("recent"; ``runner``: that runner's only, so one
    runner's figures are not measured on another's prompts), else the
    generic built-in ones."""
    if queries:
        return list(queries), "given"
    recent = recent_prompts(runner)
    if len(recent) >= MIN_RECENT:
        return recent, "recent"
    return list(DEFAULT_QUERIES), "generic"


def not_listed(recs, problems, counts):
    """``[(what, why)]`` for every skill found that is not in Hermes'
    stock listing: plugin skills and other OSes' (indexed, not listed),
    and the ones not indexed at all (shadowed, unreadable, rejected,
    disabled, hidden), so the counts add up to every SKILL.md found."""
    out = []
    for r in recs:
        if r.get("source") == "hermes-plugin":
            out.append((r["name"], "a Hermes plugin skill: Hermes lists none, skill_view(%s) loads it" % r["name"]))
        elif not os_visible(r):
            out.append((r["name"], "platforms: %s, not this OS" % ", ".join(map(str, r["vis"]["platforms"]))))
    for md, why in problems:
        if why.startswith(("duplicate name", "skipped:", "cannot read")):
            out.append((md, why))
    for key, why in (("disabled", "disabled in Hermes' config.yaml"), ("hidden", "hidden by the runner's rules")):
        n = sum(c[key] for c in counts.values())
        if n:
            out.append((render.plural(n, "skill"), why))
    return out


# ---------------------------------------------------------------- report


def measure(roots=(), index=None, queries=None, platform=None, source=None):
    """Every figure as a dict (characters; tokens are derived on output).
    ``source`` says where ``queries`` come from (``pick_queries``); by
    default, given ones, else the generic built-in prompts."""
    platform = platform or locate.env("HERMES_PLATFORM") or None
    scope = build.resolve(list(roots) or None, platform)
    recs, problems, counts = skills.collect(scope["roots"], scope["disabled"])
    # Hermes lists only the frontmatter description (no first-paragraph
    # fallback), never lists plugin skills and hides other OSes' skills.
    no_desc = {p for p, why in problems if why.startswith("missing description")}
    listed = [dict(r, description="" if os.path.join(r["path"], "SKILL.md") in no_desc else r["description"])
              for r in recs if r.get("source") != "hermes-plugin" and os_visible(r)]
    block = hermes_block(listed, _category_descriptions(scope["roots"]))
    names = names_only_block(block)
    claude = claude_listing(recs)
    top_k, inject_k = settings.limits()
    source = source or ("given" if queries else "generic")
    queries = list(queries or DEFAULT_QUERIES)
    inj, index_path = {"mean": 0.0, "p95": 0, "max": 0, "empty": len(queries)}, None
    if recs:
        inj, index_path = injection_summary({"roots": list(roots), "index": index, "platform": platform}, queries)
    return {
        "estimator": "chars/4",
        "skills": len(recs),
        "found": sum(c["found"] for c in counts.values()),
        "not_listed": not_listed(recs, problems, counts),
        "sample": sample_note(source, inj, len(queries)),
        "queries_from": source,
        "roots": [r["path"] for r in scope["roots"]],
        "index": index_path,
        "top_k": top_k,
        "inject_k": inject_k,
        "queries": len(queries),
        "hermes_block_chars": len(block),
        "claude_listing_chars": len(claude),
        "claude_over_budget": len(claude) > CLAUDE_BUDGET,
        "names_only_chars": len(names),
        # Every name the stock listing offers must survive (skill_view(name)).
        "names_listed": len(compact.block_names(block) or ()),
        "names_kept": len((compact.block_names(names) or set()) & (compact.block_names(block) or set())),
        "injection_chars": inj,
        "net_saving_chars": net_saving(len(block), len(names), inj["mean"]),
        "blocks": {"hermes": block, "names_only": names},
    }


def _fmt(n):
    return "{:,}".format(int(round(n)))


def render_text(m):
    """The table and the net saving line."""
    inj = m["injection_chars"]
    nq = m["queries"]
    rows = [
        ("stock listing: Hermes `<available_skills>` (60-char descriptions)", m["hermes_block_chars"]),
        ("names-only block (Hermes plugin)", m["names_only_chars"]),
        ("mean injection per message (TOP_K=%d, INJECT_K=%d, %d queries)" % (m["top_k"], m["inject_k"], nq),
         inj["mean"]),
        ("net saving per turn (stock - names-only - mean injection)", m["net_saving_chars"]),
    ]
    out = ["%s in %s" % (render.plural(m["skills"], "skill"), ", ".join(m["roots"]) or "(no skill folders)"), ""]
    out.append("| | tokens/turn, %s | chars |" % EST)
    out.append("|---|---:|---:|")
    for label, chars in rows:
        out.append("| %s | %s | %s |" % (label, _fmt(estimate(chars)), _fmt(chars)))
    out.append("")
    pct = 100.0 * inj["empty"] / nq if nq else 0
    out.append("injection: mean %s, p95 %s, max %s %s; nothing injected for %d of %d queries (%.0f%%)"
               % (_fmt(estimate(inj["mean"])), _fmt(estimate(inj["p95"])), _fmt(estimate(inj["max"])), EST,
                  inj["empty"], nq, pct))
    out.append("Claude Code's name + description listing: %s %s (%s chars%s)"
               % (_fmt(estimate(m["claude_listing_chars"])), EST, _fmt(m["claude_listing_chars"]),
                  "; over its 8,000-char fallback budget, so it drops descriptions"
                  if m["claude_over_budget"] else ""))
    if m["hermes_block_chars"]:
        out.append("names-only block: %.0f%% of the stock listing; %d of its %d skill names kept"
                   % (100.0 * m["names_only_chars"] / m["hermes_block_chars"], m["names_kept"], m["names_listed"]))
        out.append("net saving: %s %s per turn, %.0f%% of the stock listing"
                   % (_fmt(estimate(m["net_saving_chars"])), EST,
                      100.0 * m["net_saving_chars"] / m["hermes_block_chars"]))
    out += accounting(m)
    return "\n".join(out) + "\n"


def accounting(m):
    """The lines that say what the figures leave out: every skill found
    and not listed, with why, and what the query sample is."""
    out = []
    if m["not_listed"]:
        shown = ["%s (%s)" % (what, why) for what, why in m["not_listed"][:8]]
        more = len(m["not_listed"]) - len(shown)
        out.append("not in the stock listing, of %s found: %s%s"
                   % (render.plural(m["found"], "skill"), "; ".join(shown), "; and %d more" % more if more else ""))
    if m["sample"]:
        out.append(m["sample"])
    return out


# ------------------------------------------------------------------- CLI


def add_arguments(parser):
    """Arguments of ``skill-retrieve tokens``."""
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="skill folder (repeatable); default: the agents' skill folders")
    parser.add_argument("--index", metavar="FILE", help="index file (default: per-user cache)")
    parser.add_argument("--queries", metavar="FILE",
                        help="queries, one per line or JSONL with a \"query\" field "
                             "(default: your %d most recent prompts from the usage record, else %d generic "
                             "developer prompts)" % (RECENT, len(DEFAULT_QUERIES)))
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--platform", metavar="NAME", help="Hermes platform for skills.platform_disabled")
    parser.add_argument("--runner", metavar="RUNNER",
                        help="what this runner's own skill listing costs with and without names-only, "
                             "on the skills it reads from here (claude-code, codex, gemini, opencode)")
    parser.add_argument("--window", type=int, metavar="TOKENS",
                        help="the model's context window, for runners that budget the listing by it "
                             "(default: Claude Code 200,000, Codex 272,000)")


def mcp_tools_cost(runner):
    """Characters the MCP server's two tools add to each of ``runner``'s
    model requests: their definitions (retriever.runners.mcp_server), or
    for Claude Code, which defers MCP tools until the model searches for
    them (ToolSearch, seen with 2.1.332), their two names in its list."""
    from retriever.runners import mcp_server
    if runner == "claude-code":
        return sum(len("mcp__%s__%s\n" % (mcp_server.SERVER_NAME, t["name"])) for t in mcp_server.TOOLS)
    return len(mcp_server.tools_json())


def run_runner(args):
    """``tokens --runner R``: the runner's listing with and without names-only."""
    from retriever.runners import listing
    if args.runner not in listing.RUNNERS:
        from retriever.suggest import did_you_mean
        sys.stderr.write("skill-retrieve: error: --runner must be one of: %s (got %r)%s\n"
                         % (", ".join(listing.RUNNERS), args.runner, did_you_mean(args.runner, listing.RUNNERS)))
        return 2
    c = listing.listing_cost(args.runner, window=args.window)
    queries, source = pick_queries(args.queries_list, args.runner)
    inj = {"mean": 0.0, "p95": 0, "max": 0, "empty": len(queries)}
    if c["skills"]:
        from retriever.runners import skillsets
        from retriever.runners.registry import RUNNERS
        req = {"runner": args.runner}
        skillsets.scope_request(req)  # the folders the hook ranks from here
        inj = injection_summary(req, queries, RUNNERS[args.runner].get("load"))[0]
    saved = net_saving(c["stock"], c["names_only"], inj["mean"])
    c.update(injection_chars=inj, net_saving_chars=saved, queries=len(queries),
             sample=sample_note(source, inj, len(queries)), queries_from=source)
    c["mcp_tools"] = mcp_tools_cost(args.runner)
    if args.format == "json":
        sys.stdout.write(json.dumps(c, indent=1) + "\n")
    elif c["skills"]:
        out = ["%s: %s%s" % (c["runner"], render.plural(c["skills"], "skill"),
                                    " (%d listed in full either way)" % c["in_full"] if c["in_full"] else ""), "",
               "| %s skill listing, every turn | %s | chars |" % (c["runner"], EST), "|---|---:|---:|"]
        for label, n in (("stock (descriptions%s)" % (", after its %s-char budget" % _fmt(c["budget"])
                                                      if c["budget"] else ""), c["stock"]),
                         ("names only (skill-retrieve install %s)" % c["runner"], c["names_only"]),
                         ("mean injection per message (%d queries)" % len(queries), inj["mean"]),
                         ("net saving per turn (stock - names only - mean injection)", saved),
                         ("MCP server's tool definitions, every request (install; --no-mcp: none)%s"
                          % (" (deferred: names only)" if c["runner"] == "claude-code" else ""), c["mcp_tools"])):
            out.append("| %s | %s | %s |" % (label, _fmt(estimate(n)), _fmt(n)))
        if c["budget"] and c["unbudgeted"] > c["stock"]:
            out += ["", "over budget: %s chars of descriptions do not fit, so %s drops or shortens some "
                    "(retrieval is how those skills get seen)" % (_fmt(c["unbudgeted"] - c["stock"]), c["runner"])]
        if c["sample"]:
            out += ["", c["sample"]]
        sys.stdout.write("\n".join(out) + "\n")
    if not c["skills"]:
        sys.stderr.write("skill-retrieve: %s reads no skills from here; nothing to measure\n" % args.runner)
        return 1
    return 0


def run(args):
    """``skill-retrieve tokens``; 0, 1 when there are no skills, 2 on a usage
    error (a --root that is no folder, a --queries file it cannot read)."""
    from retriever import service
    refused = service.refuse_roots(args.root)
    if refused:  # as a query: "no skills found" would hide the typo
        return refused
    try:
        queries = load_queries(args.queries) if args.queries else None
    except OSError as exc:
        sys.stderr.write("skill-retrieve: error: --queries %s: %s\n" % (args.queries, exc.strerror or exc))
        return 2
    if args.queries and not queries:
        sys.stderr.write("skill-retrieve: no queries in %s\n" % args.queries)
        return 1
    if getattr(args, "runner", None):
        args.queries_list = queries
        return run_runner(args)
    queries, source = pick_queries(queries)
    m = measure(args.root, args.index, queries, args.platform, source)
    if args.format == "json":
        sys.stdout.write(json.dumps(m, indent=1) + "\n")
    elif m["skills"]:
        # (A table of an empty library would show a negative "saving".)
        sys.stdout.write(render_text(m))
    if not m["skills"]:
        sys.stderr.write("skill-retrieve: no skills found; nothing to measure (pass --root DIR)\n")
        return 1
    return 0
