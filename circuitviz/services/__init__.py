"""Services around the computation: the result store on disk, the shipped assets, SAEs and the
LLM client."""
