"""The subset of TensorFlow's protobuf schema the importer reads, declared here from the field
numbers of TF's public `.proto` files (graph.proto, node_def.proto, attr_value.proto,
tensor.proto, tensor_shape.proto, types.proto, function.proto, op_def.proto, versions.proto;
for SavedModels saved_model.proto, meta_graph.proto, saved_object_graph.proto,
trackable_object_graph.proto and tensor_bundle.proto).

The messages are built at import time as descriptors of their own package (`esgraph.tf`), so
reading a model needs neither TensorFlow nor generated code, and protobuf's own parser (its C
implementation) does the decoding. Fields the importer does not read are left out: protobuf
keeps them as unknown fields, and a TF version's new fields cannot break the parse.
"""
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"int32": _F.TYPE_INT32, "int64": _F.TYPE_INT64, "uint32": _F.TYPE_UINT32, "uint64": _F.TYPE_UINT64,
            "float": _F.TYPE_FLOAT, "double": _F.TYPE_DOUBLE, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
            "bytes": _F.TYPE_BYTES, "fixed32": _F.TYPE_FIXED32, "DataType": _F.TYPE_ENUM}

# message -> [(field, number, type, repeated?)]; a type not in _SCALARS is a message of this
# file, "map<string,X>" a map. DataType is an enum in TF; it is read as its number.
_MESSAGES = {
    "GraphDef": [("node", 1, "NodeDef", True), ("versions", 4, "VersionDef", False),
                 ("library", 2, "FunctionDefLibrary", False)],
    "VersionDef": [("producer", 1, "int32", False), ("min_consumer", 2, "int32", False)],
    "NodeDef": [("name", 1, "string", False), ("op", 2, "string", False), ("input", 3, "string", True),
                ("device", 4, "string", False), ("attr", 5, "map<string,AttrValue>", False)],
    "AttrValue": [("list", 1, "ListValue", False), ("s", 2, "bytes", False), ("i", 3, "int64", False),
                  ("f", 4, "float", False), ("b", 5, "bool", False), ("type", 6, "DataType", False),
                  ("shape", 7, "TensorShapeProto", False), ("tensor", 8, "TensorProto", False),
                  ("placeholder", 9, "string", False), ("func", 10, "NameAttrList", False)],
    "ListValue": [("s", 2, "bytes", True), ("i", 3, "int64", True), ("f", 4, "float", True), ("b", 5, "bool", True),
                  ("type", 6, "DataType", True), ("shape", 7, "TensorShapeProto", True),
                  ("tensor", 8, "TensorProto", True), ("func", 9, "NameAttrList", True)],
    "NameAttrList": [("name", 1, "string", False), ("attr", 2, "map<string,AttrValue>", False)],
    "TensorShapeProto": [("dim", 2, "Dim", True), ("unknown_rank", 3, "bool", False)],
    "Dim": [("size", 1, "int64", False), ("name", 2, "string", False)],
    "TensorProto": [("dtype", 1, "DataType", False), ("tensor_shape", 2, "TensorShapeProto", False),
                    ("version_number", 3, "int32", False), ("tensor_content", 4, "bytes", False),
                    ("half_val", 13, "int32", True), ("float_val", 5, "float", True),
                    ("double_val", 6, "double", True), ("int_val", 7, "int32", True),
                    ("string_val", 8, "bytes", True), ("scomplex_val", 9, "float", True),
                    ("int64_val", 10, "int64", True), ("bool_val", 11, "bool", True),
                    ("dcomplex_val", 12, "double", True), ("uint32_val", 16, "uint32", True),
                    ("uint64_val", 17, "uint64", True)],
    "FunctionDefLibrary": [("function", 1, "FunctionDef", True)],
    "FunctionDef": [("signature", 1, "OpDef", False), ("attr", 5, "map<string,AttrValue>", False),
                    ("node_def", 3, "NodeDef", True), ("ret", 4, "map<string,string>", False)],
    "OpDef": [("name", 1, "string", False), ("input_arg", 2, "ArgDef", True), ("output_arg", 3, "ArgDef", True)],
    "ArgDef": [("name", 1, "string", False), ("type", 3, "DataType", False), ("type_attr", 4, "string", False),
               ("number_attr", 5, "string", False), ("type_list_attr", 6, "string", False)],
    # SavedModel: its graphs, signatures and object graph.
    "SavedModel": [("saved_model_schema_version", 1, "int64", False), ("meta_graphs", 2, "MetaGraphDef", True)],
    "MetaGraphDef": [("meta_info_def", 1, "MetaInfoDef", False), ("graph_def", 2, "GraphDef", False),
                     ("signature_def", 5, "map<string,SignatureDef>", False),
                     ("object_graph_def", 7, "SavedObjectGraph", False)],
    "MetaInfoDef": [("tags", 4, "string", True)],
    "SignatureDef": [("inputs", 1, "map<string,TensorInfo>", False), ("outputs", 2, "map<string,TensorInfo>", False),
                     ("method_name", 3, "string", False)],
    "TensorInfo": [("name", 1, "string", False), ("dtype", 2, "DataType", False),
                   ("tensor_shape", 3, "TensorShapeProto", False)],
    "SavedObjectGraph": [("nodes", 1, "SavedObject", True),
                         ("concrete_functions", 2, "map<string,SavedConcreteFunction>", False)],
    "SavedObject": [("children", 1, "ObjectReference", True), ("variable", 7, "SavedVariable", False)],
    "ObjectReference": [("node_id", 1, "int32", False), ("local_name", 2, "string", False)],
    "SavedVariable": [("dtype", 1, "DataType", False), ("shape", 2, "TensorShapeProto", False),
                      ("name", 6, "string", False)],
    "SavedConcreteFunction": [("bound_inputs", 2, "int32", True)],
    # The checkpoint in variables/: its object graph, and the TensorBundle's header and entries.
    "TrackableObjectGraph": [("nodes", 1, "TrackableObject", True)],
    "TrackableObject": [("children", 1, "ObjectReference", True), ("attributes", 2, "SerializedTensor", True)],
    "SerializedTensor": [("name", 1, "string", False), ("full_name", 2, "string", False),
                         ("checkpoint_key", 3, "string", False)],
    "BundleHeaderProto": [("num_shards", 1, "int32", False), ("endianness", 2, "int32", False)],
    "BundleEntryProto": [("dtype", 1, "DataType", False), ("shape", 2, "TensorShapeProto", False),
                         ("shard_id", 3, "int32", False), ("offset", 4, "int64", False), ("size", 5, "int64", False),
                         ("crc32c", 6, "fixed32", False), ("slices", 7, "TensorSlice", True)],
    "TensorSlice": [],
}

# An AttrValue holds one of its fields: WhichOneof("value") tells which.
_ONEOFS = {"AttrValue": "value"}

_PACKAGE = "esgraph.tf"

# types.proto's DataType names, by number.
_TYPE_NAMES = ("INVALID", "FLOAT", "DOUBLE", "INT32", "UINT8", "INT16", "INT8", "STRING", "COMPLEX64", "INT64", "BOOL",
               "QINT8", "QUINT8", "QINT32", "BFLOAT16", "QINT16", "QUINT16", "UINT16", "COMPLEX128", "HALF", "RESOURCE",
               "VARIANT", "UINT32", "UINT64")


def _field(message, name, number, type_name, repeated):
    f = message.field.add(name=name, number=number,
                          label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if type_name == "DataType":
        f.type, f.type_name = _F.TYPE_ENUM, f".{_PACKAGE}.DataType"
    elif type_name in _SCALARS:
        f.type = _SCALARS[type_name]
    elif type_name.startswith("map<"):
        key, value = type_name[4:-1].split(",")
        entry = message.nested_type.add(name=name.capitalize() + "Entry")
        entry.options.map_entry = True
        _field(entry, "key", 1, key, False)
        _field(entry, "value", 2, value, False)
        f.label, f.type, f.type_name = _F.LABEL_REPEATED, _F.TYPE_MESSAGE, f".{_PACKAGE}.{message.name}.{entry.name}"
    else:
        f.type, f.type_name = _F.TYPE_MESSAGE, f".{_PACKAGE}.{type_name}"
    if repeated and type_name in _SCALARS and type_name not in ("string", "bytes"):
        f.options.packed = True  # proto3's default, which TF's files are


def _file():
    proto = descriptor_pb2.FileDescriptorProto(name="esgraph/tf_subset.proto", package=_PACKAGE, syntax="proto3")
    # An open enum: every number a file holds is kept, and the importer names the ones it lacks.
    # The names are what a TF.js model's JSON GraphDef spells its types with.
    enum = proto.enum_type.add(name="DataType")
    for number, name in enumerate(_TYPE_NAMES):
        enum.value.add(name=f"DT_{name}", number=number)
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        if name in _ONEOFS:
            message.oneof_decl.add(name=_ONEOFS[name])
        for field in fields:
            _field(message, *field)
            if name in _ONEOFS:
                message.field[-1].oneof_index = 0
    return proto


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
(GraphDef, NodeDef, AttrValue, TensorProto, SavedModel, TrackableObjectGraph, BundleHeaderProto,
 BundleEntryProto) = (
    message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
    for name in ("GraphDef", "NodeDef", "AttrValue", "TensorProto", "SavedModel", "TrackableObjectGraph",
                 "BundleHeaderProto", "BundleEntryProto"))
