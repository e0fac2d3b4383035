"""What is served: manifest (the model directories, and the runtime that serves each), served (the
protocol the service reads of a loaded model), stateless (a baseline served from histories) with
baseline_artifact (its directory)."""
