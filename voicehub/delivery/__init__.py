"""Delivery: speaking background results into a call at the right moment."""
