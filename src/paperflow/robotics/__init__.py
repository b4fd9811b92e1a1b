"""Robotics study: Bridge V2 multi-view extraction, a multi-view tabletop simulator, MVP-LAM.

See README.md in this folder for the data schema and the simulator's closed-loop API.
"""
