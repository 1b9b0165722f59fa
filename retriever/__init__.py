"""skill-retrieval: BM25 retrieval over agent skill libraries.

The data path reads top to bottom across the modules:
discover -> frontmatter -> skills -> tokenize/analyze -> index -> store
-> (load) store -> query -> render.  ``entry`` is the executable's hot path,
``build`` the cold one.  Importing this package does nothing else.
"""

__version__ = "0.1.0"
