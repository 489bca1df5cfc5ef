"""Runtime pieces every graph shares: context schema, chat-model factory, stream events."""
