"""What the suite's tests share: committed speech fixtures and the one waiting helper."""
