"""Static analyses of IR functions: the executor's memory, predicted exactly from struct info and liveness."""

from retrograd.analysis.memory import MemoryTimeline, memory_timeline, peak_memory

__all__ = ["MemoryTimeline", "memory_timeline", "peak_memory"]
