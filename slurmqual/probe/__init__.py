"""Probes: read the node (through FsRoot) into small records. No judgement here."""
