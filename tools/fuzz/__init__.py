"""``make fuzz``: hostile input against a running agent (``soak``) and the attacks it sends."""
