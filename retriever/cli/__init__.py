"""Front ends a person types: the executable's entry point, the argparse
CLI and its subcommands (explain, doctor, tokens, rerank-report).  They
call the core (``retriever.*``); the core never imports them."""
