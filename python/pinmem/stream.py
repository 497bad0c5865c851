class Stream: pass
