"""Orchestration as library functions: running a plan (`execute`) and re-measuring a
comparison's changed cells in pairs (`remeasure`). The commands and the nightly scripts call
them; nothing here parses flags."""
