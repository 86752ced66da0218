"""Recall and the Context Brief: ranking, packing under a budget, the brief itself."""
