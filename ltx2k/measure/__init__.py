"""Measurement: device time (cold/warm L2), host latency, bandwidth, allocations, the gate.

Each kernel launch from Python costs ~14 us of host time but ~0.6 us of device
time inside a CUDA graph, so device time and host latency are different
quantities and are measured separately (see docs/measurement.md).
"""
