"""Static analyses of IR functions: the executor's memory, predicted exactly from struct info and liveness."""

from retrograd.analysis.memory import MemoryTimeline, live_at_peak, memory_timeline, peak_memory

__all__ = ["MemoryTimeline", "live_at_peak", "memory_timeline", "peak_memory"]
