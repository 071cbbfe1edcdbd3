"""BERT-family objectives and models: MLM masking, distillation, span corruption and model-level checks."""
