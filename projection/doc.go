// Package projection holds Agent-Reach's read models: folds of the event
// log kept by eventstore.Projector, each rebuildable from position 0.
package projection
