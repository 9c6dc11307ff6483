"""Notebook 00, setup: its exercises (the code it teaches is the course's core: device, data, models, train)."""
