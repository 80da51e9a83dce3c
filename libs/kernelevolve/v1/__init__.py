"""Generated from protos/kernelevolve/v1 by scripts/gen_protos.py. Do not edit."""
