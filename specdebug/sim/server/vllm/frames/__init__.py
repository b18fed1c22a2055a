"""The sim's vLLM processes spend their time in frames named and filed like real vLLM's (issue 37).

Why: `specdebug stacks` names where a vLLM process is from its py-spy frames; on the sim the same dump
must show the same function qualnames in files of the same names as on a real server, so the tests on
the sim check the real shapes.  Each module here is named after the vLLM file its classes come from
(0.32.0 / 0.34.0 sources), and holds only the calls between those frames:

    engine core idle     EngineCoreProc.run_busy_loop -> _process_input_queue -> Queue.get   (core.py)
    engine core busy     ... -> _process_engine_step -> EngineCore.step -> FutureWrapper.result ->
                         _wait_for_response -> MultiprocExecutor.collective_rpc.<locals>.get_response ->
                         MessageQueue.dequeue (multiproc_executor.py, shm_broadcast.py)
    worker idle          WorkerProc.worker_main -> worker_busy_loop -> MessageQueue.dequeue ->
                         _GeneratorContextManager.__enter__ -> acquire_read -> SpinCondition.wait
    worker forward       worker_busy_loop -> _execute_worker_rpc -> Worker.execute_model ->
                         GPUModelRunner.execute_model -> _model_forward   (gpu_worker.py, gpu_model_runner.py)
    worker sampling      ... -> Worker.sample_tokens -> GPUModelRunner.sample_tokens -> _sample ->
                         Sampler.forward / RejectionSampler.forward      (sampler.py, rejection_sampler.py)
    worker drafting      ... -> GPUModelRunner.sample_tokens -> propose_draft_token_ids ->
                         NgramProposer.propose / EagleProposer.propose   (ngram_proposer.py, eagle.py)

At TP 1 the sim's engine core runs the model itself (UniProcExecutor.collective_rpc -> run_method ->
Worker.execute_model ...).  The API server feeds the engine core what its engine models (sim.server.
sglang.sched_frames.feed: ("work", draft_ms, verify_ms, speculative) / ("idle",)).
"""
