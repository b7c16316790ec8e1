"""The report: the runs' records, the plots and tables, the gradient analysis and the playback of agents."""
