"""The `plan_execute` graph: plan a DAG of steps, run independent steps in parallel, recover, replan, synthesize."""
