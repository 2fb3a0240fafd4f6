"""Records: the typed record on its way to the sinks, its encoding and checks."""
