"""The protocol layer: JSON off the wire in, typed domain commands out.

One module per concept. Each parser checks shapes and types and answers
every refusal with the protocol's reason code; it builds the domain's
frozen command dataclasses and never passes a wire dict on. Rendering the
domain's results back to wire names lives beside the parser.
"""
