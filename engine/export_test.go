package engine

// SchedulerKeys returns the number of keys holding state in the fair
// scheduler.
func (s *Server) SchedulerKeys() int { return s.sched.keys() }
