"""Names shared with the clients (see docs/protocol.md). One place, so a rename cannot half-happen."""

FIND_PRIOR_ART = "backstory.findPriorArt"
SEARCH = "backstory.search"
SYMBOL_HISTORY = "backstory.symbolHistory"
SHOW_COMMIT = "backstory.showCommit"
FILE_AT_REVISION = "backstory.fileAtRevision"
HOVER_INFO = "backstory.hoverInfo"
REINDEX = "backstory.reindex"
STATUS = "backstory.status"
FIND_PRIOR_ART_FOR_CHANGES = "backstory.findPriorArtForChanges"
SERVER_COMMANDS = (
    FIND_PRIOR_ART, SEARCH, SYMBOL_HISTORY, SHOW_COMMIT, FILE_AT_REVISION, HOVER_INFO, REINDEX, STATUS,
    FIND_PRIOR_ART_FOR_CHANGES,
)  # fmt: skip

# carried by code actions and hover links, implemented by the clients (not in executeCommandProvider)
UI_FIND_PRIOR_ART = "backstory.ui.findPriorArt"
UI_SYMBOL_HISTORY = "backstory.ui.symbolHistory"
UI_OPEN_COMMIT = "backstory.ui.openCommit"  # {sha, path?, newStart?, uri?}: the commit, scrolled to that change
UI_OPEN_CHANGES = "backstory.ui.openChanges"  # {sha, path, oldPath?, uri?}: the file before/after, side by side

STATUS_NOTIFICATION = "backstory/status"
PROGRESS_TITLE = "Backstory"  # the progress message says what is indexed ("indexing history 120/5,000 commits")
CONFIG_SECTION = "backstory"
