"""What a user asks for, composed from the rooms below: exact symbol history, prior art, a commit shown.

Each module is one feature over an :class:`~backstory.search.engine.Engine`; the views (CLI, language server)
call these and only these.
"""
