"""Client side of nova-cyborg: openstacksdk helpers and the CLI plugin."""
