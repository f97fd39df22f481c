"""esgraph's code generator: op_defs/*.yaml in, every binding's source out (see __main__)."""
