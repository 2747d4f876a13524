"""Streaming client for the voxcpm model of this repository's Triton server (gRPC streaming)."""

from client.streaming import StreamStats, VoxCPMClient, VoxCPMError

__all__ = ["StreamStats", "VoxCPMClient", "VoxCPMError"]
