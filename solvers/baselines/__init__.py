"""The baselines ``joint`` starts from and is judged against: the TopoOpt method
(:mod:`.topoopt_method`, with its traffic input :mod:`.traffic_input` and the TotientPerms /
SelectPermutations strides of :mod:`.strides`) and the random-regular expander
(:mod:`.expander_design`)."""

__all__: list[str] = []
