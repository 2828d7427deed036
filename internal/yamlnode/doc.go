// Package yamlnode walks a tree of YAML nodes (go.yaml.in/yaml/v3's Node)
// for the two config formats obol reads: its own config file (package
// config) and envoyproxy/ratelimit's files (package rls). It holds the
// walking itself, once: following aliases within a budget, refusing an
// alias that lies inside the value it names, applying merge keys (<<),
// finding duplicate keys, naming a node's kind for a message and reading
// a scalar as a string, a boolean or an integer.
//
// It says what is wrong as a Problem (an Issue and the node it is at);
// each caller words its own messages, with its own paths and file names.
//
// Bounds: a walk visits at most Budget(nodes, size) values, 100,000 plus
// four per node of the document (aliases can repeat a value a billion
// times from a few kilobytes); past it Deref returns nil and the walk
// reports TooLarge once. Merge keys nest at most MaxMergeDepth deep. A
// cyclic alias (one inside the value it names, which no YAML library can
// expand) is reported as Cycle when the walker is made, and Deref refuses
// it. Child looks into at most 10,000 mappings.
//
// This package is internal: it is shared by obol's own packages.
package yamlnode
