"""What the sim's SGLang and vLLM servers share: cost model, batching engine, log sink, OpenAI API, faults."""
