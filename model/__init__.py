"""Pure data model of vioconform: measurements from both sides, with no hypervisor or SSH import."""
