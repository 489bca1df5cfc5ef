"""The `memory_writer` graph: background extraction of long-term memories after a turn."""
