"""Front ends for agent runners: the runner registry, the per-prompt hook
adapter, each runner's skill folders and the installers.  They call the
core (``retriever.*``); the core never imports them."""
