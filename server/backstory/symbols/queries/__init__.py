"""Our own tree-sitter query files (``<language>.scm``), loaded with `importlib.resources`.

They complement the ``queries/tags.scm`` shipped in the grammar wheels: only ``@definition.<kind>``
captures (plus an optional ``@name``) are read by `backstory.symbols.extract`.
"""
