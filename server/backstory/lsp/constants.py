"""Names shared with the clients (see docs/protocol.md). One place, so a rename cannot half-happen."""

FIND_PRIOR_ART = "backstory.findPriorArt"
SEARCH = "backstory.search"
SYMBOL_HISTORY = "backstory.symbolHistory"
SHOW_COMMIT = "backstory.showCommit"
REINDEX = "backstory.reindex"
STATUS = "backstory.status"
FIND_PRIOR_ART_FOR_CHANGES = "backstory.findPriorArtForChanges"
SERVER_COMMANDS = (FIND_PRIOR_ART, SEARCH, SYMBOL_HISTORY, SHOW_COMMIT, REINDEX, STATUS, FIND_PRIOR_ART_FOR_CHANGES)

# carried by code actions, implemented by the clients (not in executeCommandProvider)
UI_FIND_PRIOR_ART = "backstory.ui.findPriorArt"
UI_SYMBOL_HISTORY = "backstory.ui.symbolHistory"

STATUS_NOTIFICATION = "backstory/status"
PROGRESS_TITLE = "Backstory: indexing history"
CONFIG_SECTION = "backstory"
