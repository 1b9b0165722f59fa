"""Front ends a person types: the executable's entry point, the argparse
CLI and its subcommands (explain, doctor, tokens, rerank-report).  They
call the core (``retriever.*``); the core never imports them.

``SUBCOMMANDS`` is the one list of subcommands: the fast path in
``entry`` and the argparse CLI in ``commands`` both read it.  Each
module is imported only when its subcommand runs.
"""

# name -> (module, one-line help)
SUBCOMMANDS = {
    "query": ("retriever.cli.commands", "rank skills for a query (the default subcommand)"),
    "build": ("retriever.cli.commands", "build the index for a set of skill roots"),
    "hook": ("retriever.runners.hook", "answer a runner's prompt hook (stdin JSON in, runner JSON out)"),
    "explain": ("retriever.cli.explain", "show why skills rank where they do"),
    "install": ("retriever.runners.install", "register the hook or plugin with an agent"),
    "uninstall": ("retriever.runners.install", "remove what install added"),
    "doctor": ("retriever.cli.doctor", "check skill roots, the index and runner set-up"),
    "tokens": ("retriever.cli.tokens", "estimate what retrieval saves per turn"),
    "rerank-report": ("retriever.cli.rerank_report", "summarise the LLM rerank A/B log"),
}
